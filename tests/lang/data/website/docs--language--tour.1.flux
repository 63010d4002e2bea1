flow hello -> String
  clock = now()
  utc = clock.utc
  greeting = fmt("hello — the time is {utc}")
  return greeting
