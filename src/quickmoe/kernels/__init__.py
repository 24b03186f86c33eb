"""quickmoe.kernels"""
