"""Prompted LLM classifiers over any OpenAI-compatible chat server.

Modules, one job each:
  endpoint    where to send requests and how that server speaks (structured output, system role)
  settings    the LLM options read from ModelOptions.extra, validated
  prompts     render the Jinja2 templates in prompts/ into chat messages; template-set hash
  answer      the answer JSON schema, tolerant parsing and validation against the taxonomy
  cache       SQLite response cache and request/response log (`classify logs`)
  client      async OpenAI client: bounded concurrency, retries honouring Retry-After, caching
  server      start/stop the local llama.cpp server (`local:` specs)
  fewshot     pick k examples from the training records by embedding similarity
  classifier  the Classifier implementation registered for `openai:` and `local:`
  estimate    dry-run request/token/cost estimate
"""
