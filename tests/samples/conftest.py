"""The sample_models fixture (tests/samples/rpi.py) for the tests here."""
from tests.samples.rpi import sample_models  # noqa: F401
