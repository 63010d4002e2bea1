flow wait-for-artifact
  loop for 1m, every: 2s, until: found -> found
    found = path_exists("target/release/flux")
  assert found, "artifact did not appear within 60s"
  return "artifact ready"
