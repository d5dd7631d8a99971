// Command gateway serves the client-tools chat: run it and open the URL it
// prints. With no flags it works offline on embedded defaults (the scripted
// demo model, the seed's get_weather worker tool, the page's browser tools).
package main
