"""context_parallel"""
