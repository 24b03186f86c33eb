"""quickmoe.checkpoint"""
