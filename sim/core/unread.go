package core

// markUnread sets each parameter's Unread: no op reads it or, for a tied
// copy, its owner (a tied head reads the embedding's weight through the
// copy).
func (p *Program) markUnread() {
	for i := range p.Params {
		p.Params[i].Unread = true
	}
	for i := range p.Ops {
		for _, pi := range p.Ops[i].Params {
			p.Params[pi].Unread = false
			if t := p.Params[pi].TiedTo; t >= 0 {
				p.Params[t].Unread = false
			}
		}
	}
	for i := range p.Params {
		if t := p.Params[i].TiedTo; t >= 0 && !p.Params[t].Unread {
			p.Params[i].Unread = false
		}
	}
}
