-- A ticket. ARGV: ticket, now ms. Reply: {state, value, user} or {}.
local view = ticket_view(ARGV[1], tonumber(ARGV[2]))
if not view then return {} end
return view
