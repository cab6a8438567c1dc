"""cheatsheet"""
