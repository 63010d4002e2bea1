flow careful-fetch(url: String)
  retry 3, backoff: exponential, delay: 500ms -> page
    web.fetch(url)
  assert page, "fetch returned nothing"
  return page
