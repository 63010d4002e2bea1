flow answer-handbook(question: String) -> String
  $product = read("docs/product.md")
  $policies = read("docs/policies.md")

  ctx $handbook
    purpose "answer a question from the Northstar handbook"
    budget 5000
    include $product, $policies

  $answer = ai.reason({ask: "Question: {question}\nAnswer only from the handbook. If the handbook does not say, say so.", ctx: $handbook})
  return $answer
