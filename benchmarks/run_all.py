"""``make bench``: every benchmark, one after another, each printing its figures."""

from benchmarks import webshop_bench

if __name__ == "__main__":
    webshop_bench.main()
