"""``python -m gagpo.servers.webshop.generator DIR [-n N] [--seed S] [--workers W]``."""

from gagpo.servers.webshop.generator.families import main

if __name__ == "__main__":
    raise SystemExit(main())
