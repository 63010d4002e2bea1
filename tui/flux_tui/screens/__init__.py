"""The app's screens: sessions list, one session, lineage, help."""
