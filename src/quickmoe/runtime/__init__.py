"""quickmoe.runtime"""
