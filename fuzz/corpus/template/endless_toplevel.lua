-- An endless loop while the template file itself runs (at load).
while true do end
