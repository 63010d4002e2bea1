flow cached-page(url: String)
  fallback -> page
    branch
      page = read("cache/page.html")
    branch
      retry 3, backoff: exponential, delay: 500ms -> page
        web.fetch(url)
  assert page, "no cached copy and the fetch failed"
  return page
