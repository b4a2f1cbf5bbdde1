#!/bin/bash
echo "trutle 74"
