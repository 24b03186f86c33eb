"""quickmoe.layers"""
