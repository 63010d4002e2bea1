flow price-check
  raw = web.fetch("https://api.coingecko.com/api/v3/simple/price?ids=bitcoin&vs_currencies=usd")
  price = raw.bitcoin.usd
  label = fmt("BTC is at {price} USD")
  return { label, price }
