"""The operator inventory (DESIGN.md "layers"): what a transformer layer is, as operators that each
declare their parameters, FLOPs, bytes, saved activations and implied collectives."""
