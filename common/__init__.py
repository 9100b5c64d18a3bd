"""What every layer shares and none owns: the cache folder (:mod:`gagpo.common.cache`).

The shop, the environments and the agents all import from here, so that no layer reaches down
or across into another for it.
"""
