datasource board
  kind "board:markdown"
  path "./board"
