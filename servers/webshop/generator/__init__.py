"""The catalog generator: a WebShop catalog in the original file format, made from a seed.

:mod:`~gagpo.servers.webshop.generator.families` makes the products (in families of
look-alikes) and writes the files; :mod:`~gagpo.servers.webshop.generator.vocab` is the
vocabulary it draws from. From the command line::

    python -m gagpo.servers.webshop.generator DIR [-n N] [--seed S] [--workers W]
"""
