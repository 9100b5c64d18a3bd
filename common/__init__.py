"""What every layer shares and none owns: the cache folder (:mod:`gagpo.common.cache`), the
checks of numeric settings, with the short quotes of refused values their messages use
(:mod:`gagpo.common.numbers`), the stable digest that state keys are made of
(:mod:`gagpo.common.digest`), and what the CPU computes natively (:mod:`gagpo.common.cpu`).

The shop, the environments and the agents all import from here, so that no layer reaches down
or across into another for it.
"""
