"""The registered models: backbones, necks, heads, the distiller, the token mixers mirrored."""
