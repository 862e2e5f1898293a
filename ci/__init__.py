"""The project's CI scripts. A package so that ``python -m ci.gpu_check`` runs from the checkout."""
