"""The config stage: matrix.yaml read, checked and explained.

matrix.py: the pydantic models and the one loader; fields.py: each value's type and check;
sentences.py: the YAML node tree and the one line-numbered sentence a mistake becomes;
schema.py: matrix.schema.json, generated from the models.
"""
