"""``make bench``: every benchmark, one after another, each printing its figures."""

from benchmarks import alfworld_bench, vector_bench, webshop_bench

if __name__ == "__main__":
    webshop_bench.main()
    vector_bench.main([])
    alfworld_bench.main([])
