"""Where the facts come from: live ARM, the fleet on Resource Graph, saved files."""
