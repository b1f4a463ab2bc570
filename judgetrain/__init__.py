"""judgetrain: turn vision-language models into reliable judges of time."""

__version__ = "0.1.0"
