flow latest-release
  raw = web.fetch("https://api.github.com/repos/codewandler/flux/releases/latest")
  tag = raw.tag_name
  msg = fmt("latest flux release: {tag}")
  return { message: msg, tag }
