"""Parallelism Lab's web layer: routers, charts, rendering and assets."""
