"""quickmoe.tokenizer"""
