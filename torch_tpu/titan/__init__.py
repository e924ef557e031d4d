"""TorchTitan on tpu: local assets, pod-scale recipes and their dry runs.

``python -m torch_tpu.titan.assets DIR`` writes a tokenizer and a text dataset where
TorchTitan's debug configs look for them; ``torch_tpu.titan.config_registry`` holds the
pod recipes (``--module torch_tpu.titan --config llama3_8b_v5p_128``) and
``python -m torch_tpu.titan.dry_run`` checks that each fits its chips.
"""
