"""quickmoe.models"""
