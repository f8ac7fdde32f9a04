"""Perturbation-set generation (similar questions, [BLANK]ed variants, paraphrases).

Not implemented yet: this package is built by the perturbation-generator issue.
"""
