"""repro: reproduce the published MLPerf Inference Llama-2-70B Offline results on Azure GPU VMs."""

__version__ = "0.1.0"
