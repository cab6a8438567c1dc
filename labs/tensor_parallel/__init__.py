"""tensor_parallel"""
