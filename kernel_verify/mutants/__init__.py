"""Deliberately broken implementations that the property suite must catch (mutation testing).

:mod:`kernel_verify.mutants.catalogue` lists them (``MUTANTS``); ``kernel-verify mutants``
(:mod:`kernel_verify.mutants.runner`) runs the suite against each one and prints the kill
matrix. Every mutant is a list of ordinary third-party targets
(:mod:`kernel_verify.properties.protocol`) that
*claim what the correct implementation claims*: the lie is what the suite has to catch.
"""
