"""data_parallel"""
