"""quickmoe.formats"""
