"""judgetrain: turn vision-language models into reliable judges of time.
README: "Layout".
"""

__version__ = "0.1.0"
