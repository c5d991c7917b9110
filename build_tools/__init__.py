"""Build stages of sparse-mla-aot: render -> compile -> inspect -> select -> report (-> package)."""
