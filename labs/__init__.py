"""Parallelism Lab's simulation engine: pure Python, no web, template or chart imports."""
