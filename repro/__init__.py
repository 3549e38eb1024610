"""repro: reproduce published MLPerf Inference results (Llama-2-70B, Llama-3.1-405B, DeepSeek-R1) on Azure GPU VMs."""

__version__ = "0.1.0"
