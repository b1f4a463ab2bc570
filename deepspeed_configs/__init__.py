"""DeepSpeed and accelerate configs (data). Installed as ``judgetrain.deepspeed_configs``
so that ``judgetrain train --accelerate-config NAME`` finds them outside a checkout."""
