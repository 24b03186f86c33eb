"""quickmoe.layouts"""
