"""Unit tests of the project (not shipped): the same Hypothesis profiles as the property suite."""

from kernel_verify.properties import profiles

PROFILE = profiles.load()
