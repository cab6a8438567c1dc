"""zero"""
