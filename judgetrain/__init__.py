"""judgetrain: turn vision-language models into reliable judges of time.
Docs: "reference/development.md".
"""

__version__ = "0.1.0"
